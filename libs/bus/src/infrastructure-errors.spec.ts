import { DependencyUnavailableError, isInfrastructureError } from './infrastructure-errors';
import { NonRetriableError } from './message-bus';

describe('isInfrastructureError: the dependency, not the record', () => {
  const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

  it.each([
    ['a refused connection (store or broker down)', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a reset connection', withCode('read ECONNRESET', 'ECONNRESET')],
    ['PostgreSQL shutting down (57P01)', withCode('terminating connection due to administrator command', '57P01')],
    ['PostgreSQL starting up (57P03)', withCode('the database system is starting up', '57P03')],
    ['a connection exception (08006)', withCode('connection failure', '08006')],
    ['a serialization failure (40001)', withCode('could not serialize access', '40001')],
    ['the pg driver losing its connection', new Error('Connection terminated unexpectedly')],
    ['TypeORM around a driver error', Object.assign(new Error('QueryFailedError'), { driverError: withCode('x', '57P01') })],
    ['an error caused by one', new Error('store write failed', { cause: withCode('connect ECONNREFUSED', 'ECONNREFUSED') })],
    ['a retriable kafkajs error', Object.assign(new Error('Connection timeout'), { name: 'KafkaJSConnectionError', retriable: true })],
    ['the explicit marker', new DependencyUnavailableError('the request manager is down')],
    [
      "kafkajs's non-retriable wrapper of a refused connection (its message only)",
      Object.assign(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:9092'), { name: 'KafkaJSNonRetriableError', retriable: false }),
    ],
  ])('%s', (_what, err) => {
    expect(isInfrastructureError(err)).toBe(true);
  });

  it.each([
    ['a plain handler error', new Error('downstream unavailable')],
    ['a non-retriable error', new NonRetriableError('bad record')],
    ['a constraint violation (23505)', withCode('duplicate key value violates unique constraint', '23505')],
    ['a syntax error (42601)', withCode('syntax error at or near', '42601')],
    ['a non-retriable kafkajs error', Object.assign(new Error('message too large'), { name: 'KafkaJSProtocolError', retriable: false })],
    ['not an error at all', 'oops'],
  ])('%s is the record’s', (_what, err) => {
    expect(isInfrastructureError(err)).toBe(false);
  });
});
