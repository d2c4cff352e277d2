import type { InProcessBus } from '@robustrl/bus';
import { decodeMessage, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';

/** Every message of `type` an in-process bus holds, topic by topic, each topic in its order. */
export function messagesOf<T extends MessageType>(bus: InProcessBus, type: T): MessageOf<T>[] {
  return Object.values(Topics)
    .flatMap((t) => bus.read(t))
    .map((r) => decodeMessage(r.value))
    .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
    .map((d) => d.message as MessageOf<T>);
}
