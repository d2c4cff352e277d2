import { Logger } from '@nestjs/common';
import { BusLogger } from '@robustrl/bus';

export function nestBusLogger(context: string): BusLogger {
  const logger = new Logger(`${context}/bus`);
  const fmt = (msg: string, fields?: Record<string, unknown>) => (fields ? `${msg} ${JSON.stringify(fields)}` : msg);
  return {
    info: (msg, fields) => logger.debug(fmt(msg, fields)),
    warn: (msg, fields) => logger.warn(fmt(msg, fields)),
    error: (msg, fields) => logger.error(fmt(msg, fields)),
  };
}
