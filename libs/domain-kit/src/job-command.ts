/**
 * The two ways a job's decider is asked to decide: a message about the job arrived at `now`, or time
 * passed (`now` is the host's clock: the wall clock in the services, the virtual clock in the
 * simulator, a number in a spec). Every job decider takes exactly these commands.
 */
export type JobCommand<Input> = { kind: 'observe'; message: Input; now: number } | { kind: 'tick'; now: number };

export const observe = <Input>(message: Input, now: number): JobCommand<Input> => ({ kind: 'observe', message, now });
export const tick = <Input = never>(now: number): JobCommand<Input> => ({ kind: 'tick', now });
