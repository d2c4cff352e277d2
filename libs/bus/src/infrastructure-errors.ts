/**
 * Which handler failures are the infrastructure's, not the record's: a store or broker that is down,
 * restarting or timing out. The rule now lives with robustrl's other errors in `errors.ts`
 * (`failureClass`, docs/contributors/delivery-guarantees.md "Bad input never blocks"); these names stay
 * importable from here.
 */
export { DependencyUnavailableError, isInfrastructureError } from './errors';
