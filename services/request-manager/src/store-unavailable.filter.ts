import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import { isInfrastructureError } from '@robustrl/bus';

interface JsonResponse {
  status(code: number): JsonResponse;
  setHeader(name: string, value: string): void;
  json(body: unknown): void;
}

/**
 * The trajectory API's answer when PostgreSQL is down or restarting: 503 with `retry-after`, so routers,
 * agent loops and trainers wait and ask again — not a 500, which reads as a bug in the request (the
 * chaos campaign's PostgreSQL restart showed every call answered 500). HTTP errors keep their status;
 * anything else is a 500 as Nest would answer it.
 */
@Catch()
export class StoreUnavailableFilter implements ExceptionFilter {
  private readonly logger = new Logger('request-manager');

  catch(err: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<JsonResponse>();
    if (err instanceof HttpException) {
      const body = err.getResponse();
      res.status(err.getStatus()).json(typeof body === 'string' ? { statusCode: err.getStatus(), message: body } : body);
      return;
    }
    if (isInfrastructureError(err)) {
      res.setHeader('retry-after', '2');
      res.status(503).json({ error: `the trajectory store is unavailable, ask again: ${err instanceof Error ? err.message : String(err)}` });
      return;
    }
    this.logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    res.status(500).json({ statusCode: 500, message: 'Internal server error' });
  }
}
