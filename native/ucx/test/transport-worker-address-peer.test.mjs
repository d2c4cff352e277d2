import { transportSuite } from './transport-suite.mjs';

transportSuite('worker-address ep, errorHandling peer', undefined, { rma: 'worker-address', errorHandling: 'peer' });
