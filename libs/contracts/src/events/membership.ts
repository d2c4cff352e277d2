import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { MachineId, Role, TrainingMode } from './common';

export const JobStarted = event(
  'JobStarted',
  Topics.membership,
  'A job (or a resumed job) began; its first iteration is special for escalation (paper §5.1.2 rule 1).',
  z.object({
    mode: TrainingMode,
    resumedFromStep: z.int().nonnegative().nullable(),
    trainerMachines: z.int().nonnegative(),
    rolloutMachines: z.int().nonnegative(),
  }),
);

export const MachineRegistered = event(
  'MachineRegistered',
  Topics.membership,
  'An agent on a GPU machine joined the job with a role.',
  z.object({
    machineId: MachineId,
    role: Role,
    zone: z.string().min(1),
    hardwareClass: z.string().min(1),
    gpus: z.int().positive(),
    agentAddress: z.string().min(1),
    dpRank: z.int().nonnegative().nullable(),
  }),
);

export const MachineRoleChanged = event(
  'MachineRoleChanged',
  Topics.membership,
  'A machine moved between roles, e.g. a rollout lent to the trainer group as warm standby (paper §5.1.3).',
  z.object({ machineId: MachineId, from: Role, to: Role, reason: z.string().min(1) }),
);

export const MachineDeregistered = event(
  'MachineDeregistered',
  Topics.membership,
  'A machine left the job: isolated after a fault, replaced, or scaled down.',
  z.object({ machineId: MachineId, reason: z.string().min(1) }),
);
