import { ControllerModule } from '@robustrl/controller';
import { DetectorModule } from '@robustrl/detector';
import { RequestManagerModule } from '@robustrl/request-manager';
import { RolloutManagerModule } from '@robustrl/rollout-manager';
import { WeightRegistryModule } from '@robustrl/weight-registry';

/**
 * The five control-plane services in one process, sharing one bus and one store (provided by the
 * core module). Agents are not part of it: there is one per GPU machine, next to the role it watches.
 */
export const EMBEDDED_SERVICE_MODULES = [DetectorModule, ControllerModule, RequestManagerModule, RolloutManagerModule, WeightRegistryModule];
