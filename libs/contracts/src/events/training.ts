import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { IsoTime, Step } from './common';

export const TrainingStepStarted = event(
  'TrainingStepStarted',
  Topics.training,
  'The trainer began a step on a batch.',
  z.object({ step: Step, batchId: z.string().min(1), startedAt: IsoTime }),
);
export const TrainingStepCompleted = event(
  'TrainingStepCompleted',
  Topics.training,
  'The trainer finished a step.',
  z.object({ step: Step, batchId: z.string().min(1), durationMs: z.int().nonnegative() }),
);
export const CheckpointSaved = event(
  'CheckpointSaved',
  Topics.training,
  'A per-step checkpoint is durable; a restarted trainer reloads the latest one (paper §5.1.2).',
  z.object({ step: Step, uri: z.string().min(1), blockingMs: z.int().nonnegative() }),
);
