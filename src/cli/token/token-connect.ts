import { resolveConfig, type ConnectionFlags, type ResolvedConfig } from '../../config/index.js';
import { connect } from '../../pipeline/run/connection.js';
import { serviceTargetOf, type CredentialsNeeded } from '../shared/command-context.js';
import type { Connect, Connection } from './token-io.js';

/**
 * The connection of `token` and `doctor`: the shared configuration rules, and for --env local the embedded
 * service, which runs only while the command does.
 */

export function resolveFor(flags: ConnectionFlags, require: CredentialsNeeded): ResolvedConfig {
  return resolveConfig(flags, process.env, {}, { require });
}

export async function openConnection(config: ResolvedConfig): Promise<Connection & { baseUrl: string }> {
  const connection = await connect(serviceTargetOf(config));
  return { ...connection, baseUrl: connection.target.baseUrl };
}

export function connector(flags: ConnectionFlags): Connect {
  return async (require) => openConnection(resolveFor(flags, require));
}
