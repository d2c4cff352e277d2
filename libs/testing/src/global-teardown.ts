import { stopLocalServices } from './real-services';

/** Stop what the setup started, unless asked to keep it for a faster next run. */
export default async function globalTeardown(): Promise<void> {
  if (process.env.ROBUSTRL_TEST_STARTED_SERVICES === '1' && process.env.ROBUSTRL_KEEP_SERVICES !== '1') {
    stopLocalServices();
  }
}
