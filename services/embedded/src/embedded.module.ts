import { Module } from '@nestjs/common';
import { TopicName } from '@robustrl/contracts';
import { CONTROLLER_INPUTS, ControllerModule } from '@robustrl/controller';
import { DETECTOR_INPUTS, DetectorModule } from '@robustrl/detector';
import { REQUEST_MANAGER_INPUTS, RequestManagerModule } from '@robustrl/request-manager';
import { ROLLOUT_MANAGER_INPUTS, RolloutManagerModule } from '@robustrl/rollout-manager';
import { WEIGHT_REGISTRY_INPUTS, WeightRegistryModule } from '@robustrl/weight-registry';

/**
 * The five control-plane services in one process, sharing one bus and one store (provided by the
 * core module). Agents are not part of it: there is one per GPU machine, next to the role it watches.
 */
export const EMBEDDED_SERVICE_MODULES = [DetectorModule, ControllerModule, RequestManagerModule, RolloutManagerModule, WeightRegistryModule];

export const EMBEDDED_SERVICE_INPUTS: ReadonlyArray<readonly TopicName[]> = [
  DETECTOR_INPUTS,
  CONTROLLER_INPUTS,
  REQUEST_MANAGER_INPUTS,
  ROLLOUT_MANAGER_INPUTS,
  WEIGHT_REGISTRY_INPUTS,
];

@Module({ imports: EMBEDDED_SERVICE_MODULES })
export class EmbeddedModule {}
