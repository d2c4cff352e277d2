import { BadRequestException, Body, Controller, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { JobIdText, jobStartedMessage, JobStartRequest, RobustrlMessage } from '@robustrl/contracts';
import { MESSAGE_BUS } from '@robustrl/service-kit';

/**
 * `POST /v1/jobs/:jobId/start` (docs/integrators/job-start.md): announces a job as `robustrl job start`
 * does, for launchers that have no Node (`python -m robustrl.jobs start`). The body is
 * `JobStartRequest` (libs/contracts http/job-start-api.ts); a bad one is a 400 naming each field. The
 * same job and `runId` publish the same event id, so a retried announcement is one. A caller's token
 * (the service's `caller` scope) is needed where the API asks for tokens.
 */
@Controller('v1/jobs')
export class JobStartController {
  constructor(@Inject(MESSAGE_BUS) private readonly bus: MessageBus) {}

  @Post(':jobId/start')
  @HttpCode(202)
  async start(@Param('jobId') jobId: string, @Body() body: unknown) {
    const issues: Array<{ path: string; message: string }> = [];
    const id = JobIdText.safeParse(jobId);
    if (!id.success) issues.push(...id.error.issues.map((i) => ({ path: 'jobId', message: i.message })));
    const request = JobStartRequest.safeParse(body ?? {});
    if (!request.success) issues.push(...request.error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message })));
    if (!id.success || !request.success) throw new BadRequestException({ error: 'invalid job start', issues });
    const message = jobStartedMessage(id.data, request.data, new Date(), 'controller/job-start');
    await this.bus.publish(message as RobustrlMessage);
    return { accepted: true, eventId: message.eventId, jobId: id.data };
  }
}
