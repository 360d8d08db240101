/** Starts the embedded local service of `--env local`, given only what the service needs: its identity scope. */
import type { IdentityScopeName } from '../../config/index.js';

/** The embedded service as a run connects to it. */
export interface EmbeddedService {
  url: string;
  apiKey: string;
  clientSecret: string;
  close(): Promise<void>;
}

/** How a command starts the embedded service; injected, so that the configuration never travels into the service. */
export type EmbeddedServiceStarter = (scope: IdentityScopeName) => Promise<EmbeddedService>;

/**
 * `--env local`: starts the local identity service in this process on a free loopback port, with a fresh key
 * pair (no credentials needed). The default seed is fixed, so the raw UIDs are the same from run to run and a
 * state file made against `--env local` stays valid.
 */
export const startEmbeddedService: EmbeddedServiceStarter = async (scope) => {
  // loaded here, not at start-up: a run against a real service never needs the local one's code
  const { startService } = await import('../../service/index.js');
  return startService({ scope });
};
