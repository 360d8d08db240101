export * from './types.js';
export { ConfigError } from './errors.js';
export {
  ENVIRONMENTS,
  DEFAULT_ENV,
  LOCAL_PLACEHOLDER_URL,
  environmentForUrl,
  environmentNames,
  findEnvironment,
  parseScope,
} from './environments.js';
export { checkBaseUrl, isLoopbackHost } from './base-url.js';
export { defaultConfigPath, parseConfigFile, DEFAULT_PROFILE, type Profile, type ConfigFile } from './profiles.js';
export {
  resolveConfig,
  stateSetting,
  defaultConfigDeps,
  attachLocalService,
  credentialsForDisplay,
  envFingerprint,
  type ConfigDisplay,
} from './resolve.js';
export { resolveProxy, parseProxyUrl, PROXY_OFF } from './proxy.js';
export { looksLikeSecretFlag, rejectSecretFlags, SECRET_FLAGS } from './secret-flags.js';
