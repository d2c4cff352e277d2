import { DEAD_LETTER_TOPIC } from '@robustrl/contracts';
import { fromDeadLetterRecord, InProcessBus } from '@robustrl/bus';
import { EventStore } from '@robustrl/store';
import { describeBusContract } from './bus-contract';

describeBusContract('in-process bus with PGlite store', async () => {
  const store = await EventStore.open({ kind: 'pglite' });
  const bus = new InProcessBus({ logger: { info: () => undefined, warn: () => undefined, error: console.error }, deadLetterLedger: store.deadLetterClaims });
  return {
    bus,
    store,
    deadLetters: () => bus.read(DEAD_LETTER_TOPIC).map(fromDeadLetterRecord),
    withIdentity: async (identity) => {
      const peer = new InProcessBus({ logger: { info: () => undefined, warn: () => undefined, error: console.error }, identity });
      return { bus: peer, deadLetters: () => peer.read(DEAD_LETTER_TOPIC).map(fromDeadLetterRecord), teardown: () => peer.close() };
    },
    teardown: async () => {
      await bus.close();
      await store.close();
    },
  };
});
