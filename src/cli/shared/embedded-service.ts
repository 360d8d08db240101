import { attachLocalService, type ResolvedConfig } from '../../config/index.js';
import { startService } from '../../service/index.js';

/** The embedded service of `--env local`, with the config pointed at it. */
export interface EmbeddedService {
  config: ResolvedConfig;
  close(): Promise<void>;
}

/**
 * `--env local`: starts the local identity service in this process on a free loopback port, with a fresh key
 * pair, and gives back the config pointed at it (no credentials needed). The default seed is fixed, so the
 * raw UIDs are the same from run to run and a state file made against `--env local` stays valid.
 * For any other environment the config is returned as is and close() does nothing.
 */
export async function startEmbeddedServiceIfLocal(config: ResolvedConfig): Promise<EmbeddedService> {
  if (!config.isLocal) return { config, close: () => Promise.resolve() };
  const service = await startService({ scope: config.env.scope });
  return { config: attachLocalService(config, service), close: () => service.close() };
}
