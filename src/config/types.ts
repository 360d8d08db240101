/** Where a credential came from, for `doctor` and error messages. Never the value itself. */
export type CredentialSource = 'env' | 'file' | 'profile' | 'local-service' | 'none';

export type IdentityScopeName = 'UID2' | 'EUID';

export interface EnvironmentInfo {
  name: string;
  baseUrl: string;
  scope: IdentityScopeName;
  /** The public service: at most 20 map requests in flight, opt-out checks sequential. */
  isPublic: boolean;
}

export interface ResolvedConfig {
  env: EnvironmentInfo;
  /** True for --env local: the CLI starts the embedded service and takes its credentials. */
  isLocal: boolean;
  apiKey?: string;
  clientSecret?: string;
  apiKeySource: CredentialSource;
  clientSecretSource: CredentialSource;
  /** Profile name used, if any. */
  profile?: string;
}
