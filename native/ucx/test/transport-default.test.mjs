import { transportSuite } from './transport-suite.mjs';

transportSuite('UCX default selection (sockaddr ep)', undefined, {});
