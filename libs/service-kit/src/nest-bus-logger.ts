import { Logger } from '@nestjs/common';
import { BusLogger } from '@robustrl/bus';

/** A BusLogger writing through Nest's logger as `<context>/<part>` (the bus, or another dependency the bus's helpers wait for). */
export function nestBusLogger(context: string, part = 'bus'): BusLogger {
  const logger = new Logger(`${context}/${part}`);
  const fmt = (msg: string, fields?: Record<string, unknown>) => (fields ? `${msg} ${JSON.stringify(fields)}` : msg);
  return {
    info: (msg, fields) => logger.debug(fmt(msg, fields)),
    warn: (msg, fields) => logger.warn(fmt(msg, fields)),
    error: (msg, fields) => logger.error(fmt(msg, fields)),
  };
}
