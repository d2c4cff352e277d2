/**
 * The controller as it was before it evolved in place: every fold a new state, every decision a walk
 * over every recovery. The reference the in-place controller is held to (`controller-in-place.spec.ts`),
 * spec code only. Its state is the live controller's facts (`ControllerData`) without the index; the
 * records, settings and readers of the facts are the live ones (../../controller.state.ts). What it keeps
 * of its own is what differs: the copying fold (controller.evolve.ts) and the decisions that walk every
 * recovery or fold their own outputs (controller.decide.ts).
 */
export * from '../../src/controller.state';
import { ControllerData, initialControllerData } from '../../src/controller.state';

/** The facts alone: no index beside them. */
export type ControllerState = ControllerData;
export const initialControllerState = (): ControllerState => initialControllerData();
