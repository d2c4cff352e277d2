import { EventStore } from '@robustrl/store';
import { describeEventStore } from '../../../test/contract/event-store-contract';

describeEventStore('PGlite (embedded)', async () => {
  const store = await EventStore.open({ kind: 'pglite' });
  return { store, close: () => store.close() };
});
