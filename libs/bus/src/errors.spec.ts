import { DependencyUnavailableError, failureClass, FailureClass, isInfrastructureError, isRetriable, NonRetriableError, RobustrlError } from './errors';
import { RecordTooLargeError } from './raw-record';
import { NotCoPartitionedError } from './kafka/kafka-bus';
import * as fromMessageBus from './message-bus';
import * as fromInfrastructureErrors from './infrastructure-errors';

class SomeFailure extends RobustrlError {}

describe('RobustrlError: the base of robustrl errors', () => {
  it("is named after its subclass, and retriable unless it says otherwise (kafkajs's default)", () => {
    const err = new SomeFailure('the machine host did not answer');
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('SomeFailure');
    expect(err.message).toBe('the machine host did not answer');
    expect(err.retriable).toBe(true);
    expect(String(err)).toBe('SomeFailure: the machine host did not answer');
  });

  it('carries the flag and the cause it is given', () => {
    const cause = new Error('403 forbidden');
    const err = new SomeFailure('cannot scale', { retriable: false, cause });
    expect(err.retriable).toBe(false);
    expect(err.cause).toBe(cause);
    expect('cause' in new SomeFailure('no cause')).toBe(false);
  });

  it("keeps the bus's errors' names and flags", () => {
    expect(new NonRetriableError('bad record')).toMatchObject({ name: 'NonRetriableError', retriable: false });
    expect(new RecordTooLargeError('t', 2, 1)).toMatchObject({ name: 'RecordTooLargeError', retriable: false });
    expect(new NotCoPartitionedError('shard')).toMatchObject({ name: 'NotCoPartitionedError', retriable: false });
    expect(new DependencyUnavailableError('down')).toMatchObject({ name: 'DependencyUnavailableError', retriable: true, infrastructure: true });
  });

  it('the old modules still export the same names', () => {
    expect(fromMessageBus.NonRetriableError).toBe(NonRetriableError);
    expect(fromMessageBus.isRetriable).toBe(isRetriable);
    expect(fromInfrastructureErrors.DependencyUnavailableError).toBe(DependencyUnavailableError);
    expect(fromInfrastructureErrors.isInfrastructureError).toBe(isInfrastructureError);
  });
});

describe('failureClass: the one retriable rule', () => {
  const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });
  const kafkajs = (name: string, message: string, retriable: boolean) => Object.assign(new Error(message), { name, retriable });

  it.each<[string, unknown, FailureClass]>([
    ['a robustrl error, retriable', new SomeFailure('try again'), 'retriable'],
    ['a robustrl error, not retriable', new SomeFailure('give up', { retriable: false }), 'final'],
    ['NonRetriableError', new NonRetriableError('bad record'), 'final'],
    ['a record too large for the bus', new RecordTooLargeError('t', 2, 1), 'final'],
    ['DependencyUnavailableError', new DependencyUnavailableError('the request manager is down'), 'unavailable'],
    ['a plain Error', new Error('handler bug'), 'retriable'],
    ['a TypeError', new TypeError('x is undefined'), 'retriable'],
    ['a kafkajs-like error, retriable', kafkajs('KafkaJSConnectionError', 'Connection timeout', true), 'unavailable'],
    ['a kafkajs-like error, not retriable', kafkajs('KafkaJSProtocolError', 'message too large', false), 'final'],
    [
      "kafkajs's non-retriable wrapper of a refused connection",
      kafkajs('KafkaJSNonRetriableError', 'Connection error: connect ECONNREFUSED 127.0.0.1:9092', false),
      'unavailable',
    ],
    ['an object saying retriable: true (not kafkajs)', { retriable: true }, 'retriable'],
    ['an object saying retriable: false', { retriable: false }, 'final'],
    ['PostgreSQL shutting down (57P01)', withCode('terminating connection due to administrator command', '57P01'), 'unavailable'],
    ['a serialization failure (40001)', withCode('could not serialize access', '40001'), 'unavailable'],
    ['TypeORM around a driver that lost its connection', Object.assign(new Error('QueryFailedError'), { driverError: withCode('x', '08006') }), 'unavailable'],
    [
      'a robustrl error caused by a refused connection',
      new SomeFailure('store write failed', { retriable: false, cause: withCode('connect ECONNREFUSED', 'ECONNREFUSED') }),
      'unavailable',
    ],
    ['a constraint violation (23505)', withCode('duplicate key value violates unique constraint', '23505'), 'retriable'],
    ['a string', 'oops', 'retriable'],
    ['undefined', undefined, 'retriable'],
    ['null', null, 'retriable'],
    ['a number', 42, 'retriable'],
  ])('%s', (_what, err, expected) => {
    expect(failureClass(err)).toBe(expected);
    expect(isRetriable(err)).toBe(expected !== 'final');
    expect(isInfrastructureError(err)).toBe(expected === 'unavailable');
  });
});
