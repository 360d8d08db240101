import { createServiceClient } from '../client/index.js';
import { resolveConfig, type ConnectionFlags, type ResolvedConfig } from '../config/index.js';
import { startEmbeddedServiceIfLocal } from './local-service.js';
import type { Connect, Connection } from './token-io.js';

/**
 * The connection of `token` and `doctor`: the shared configuration rules, and for --env local the embedded
 * service, which runs only while the command does.
 */

export function resolveFor(flags: ConnectionFlags, require: { apiKey: boolean; clientSecret: boolean }): ResolvedConfig {
  return resolveConfig(flags, process.env, {}, { require });
}

export async function openConnection(config: ResolvedConfig): Promise<Connection & { baseUrl: string }> {
  const embedded = await startEmbeddedServiceIfLocal(config);
  const cfg = embedded.config;
  const client = createServiceClient({
    baseUrl: cfg.env.baseUrl,
    ...(cfg.apiKey !== undefined ? { apiKey: cfg.apiKey } : {}),
    ...(cfg.clientSecret !== undefined ? { clientSecret: cfg.clientSecret } : {}),
    ...(cfg.timeoutMs !== undefined ? { requestTimeoutMs: cfg.timeoutMs } : {}),
    ...(cfg.maxAttempts !== undefined ? { maxAttempts: cfg.maxAttempts } : {}),
  });
  return {
    client,
    config: cfg,
    baseUrl: cfg.env.baseUrl,
    close: async () => {
      await client.close();
      await embedded.close();
    },
  };
}

export function connector(flags: ConnectionFlags): Connect {
  return async (require) => openConnection(resolveFor(flags, require));
}
