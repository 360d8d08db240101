/** Failures that stop a run before any batch got through: no retry within the run could clear them. */
import { NetworkError } from '../../client/errors.js';
import { ClientError, ServiceError, UnauthorizedError } from '../../protocol/index.js';

/**
 * The run stopped before any batch was answered, for a reason every further batch would meet too (nothing listens
 * at the URL, no such host, TLS refused, a proxy wanting credentials, a 403): one message with the cause and how
 * to fix it, instead of a complete-looking output of `error` rows.
 */
export class ServiceUnreachableError extends Error {
  override name = 'ServiceUnreachableError';
}

/** As ServiceUnreachableError, but the service refused the credentials: the client secret is not the key's. */
export class CredentialsRefusedError extends ServiceUnreachableError {
  override name = 'CredentialsRefusedError';
}

const URL_FIX = 'check the URL (--env / --base-url)';

/** Why the service cannot be reached: the network's half. */
function networkCause(error: NetworkError): string | undefined {
  switch (error.failure) {
    case 'refused':
      return `${error.message}; ${URL_FIX}, its port, and that the service is running there`;
    case 'dns':
      // EAI_AGAIN is a resolver that did not answer in time: it may answer on the next run's first try
      return error.code === 'ENOTFOUND' ? `${error.message}; ${URL_FIX} and this machine's DNS` : undefined;
    case 'tls':
      return (
        `${error.message}; ${URL_FIX}: an https:// URL must name a port that speaks TLS, and the certificate must be ` +
        'trusted (NODE_EXTRA_CA_CERTS=FILE for a private CA)'
      );
    case 'proxy-auth':
      // the message already says how to fix it
      return error.message;
    default:
      return undefined;
  }
}

/**
 * The error to stop a run with, when `error` (a batch's failure after its retries, before any batch of the run was
 * answered) cannot clear by itself within the run; undefined when it may (a reset, a timeout, a 5xx, a 429).
 * 401 is not here: the run lifecycle stops on it at any point of the run.
 */
export function unreachableService(error: Error): ServiceUnreachableError | undefined {
  const lead = 'stopped before any request was answered: ';
  if (error instanceof NetworkError) {
    const cause = networkCause(error);
    return cause === undefined ? undefined : new ServiceUnreachableError(lead + cause, { cause: error });
  }
  if (error instanceof UnauthorizedError) return undefined;
  if (error instanceof ClientError && /Check encryption key \(ClientSecret\)/i.test(error.message)) {
    return new CredentialsRefusedError(
      `${lead}the client secret does not match the API key: the service could not decrypt the request ` +
        '(400 Check encryption key (ClientSecret)); use the secret issued with this key ' +
        '(UID2_CLIENT_SECRET / --client-secret-file)',
      { cause: error },
    );
  }
  if (error instanceof ServiceError && error.httpStatus === 403) {
    return new ServiceUnreachableError(
      `${lead}the service or a gateway in front of it refused access (${error.message}); check that this key ` +
        'and this machine may use that URL (--env / --base-url)',
      { cause: error },
    );
  }
  return undefined;
}
