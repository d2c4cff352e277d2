import { transportSuite } from './transport-suite.mjs';

transportSuite('tcp', 'tcp', {});
