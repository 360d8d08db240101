// One fake service for a test file, started and stopped by its hooks, and clients of it closed after each test.
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createServiceClient, type ClientOptions, type ServiceClient } from '../../src/client/index.js';
import { startFakeService, type FakeService } from './fake-service.js';

export interface FakeServiceClients {
  /** The file's fake service (started before its first test). */
  readonly service: FakeService;
  /** A client of it that never really sleeps between attempts, with the file's defaults and then `options`. */
  client(options?: Partial<ClientOptions>): ServiceClient;
}

export function useFakeService(defaults: Partial<ClientOptions> = {}): FakeServiceClients {
  let service: FakeService | undefined;
  const clients: ServiceClient[] = [];
  beforeAll(async () => {
    service = await startFakeService();
  });
  afterAll(async () => {
    await service?.close();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  const started = (): FakeService => {
    if (service === undefined) throw new Error('the fake service starts in beforeAll: use it inside a test');
    return service;
  };
  return {
    get service() {
      return started();
    },
    client(options = {}) {
      const s = started();
      const c = createServiceClient({
        baseUrl: s.url,
        apiKey: s.apiKey,
        clientSecret: s.clientSecret,
        sleep: async () => {},
        ...defaults,
        ...options,
      });
      clients.push(c);
      return c;
    },
  };
}
