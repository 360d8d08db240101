import { describe, expect, it } from 'vitest';
import { stateSetting } from '../../src/config/index.js';
import { fakeMachine } from './fake-fs.js';

const CONFIG = '/home/ana/.config/uid2-batch/config.json';
const config = (profiles: Record<string, Record<string, string>>) =>
  fakeMachine({ [CONFIG]: JSON.stringify({ profiles }) }).deps;

describe('what --state names when it is not given', () => {
  it('is UID2_BATCH_STATE before the profile, and nothing when neither is set', () => {
    const deps = config({ default: { state: 'nightly.db' } });
    expect(stateSetting({}, { UID2_BATCH_STATE: 'postgres://batch@db/uid2' }, deps)).toEqual({
      value: 'postgres://batch@db/uid2',
      from: 'UID2_BATCH_STATE',
    });
    expect(stateSetting({}, {}, config({ default: { env: 'integ' } }))).toBeUndefined();
    expect(stateSetting({}, {}, fakeMachine().deps)).toBeUndefined();
  });

  it("is the profile's state: a file relative to the config file, a URL as it is", () => {
    const deps = config({ default: { state: 'nightly.db' }, pg: { state: 'postgresql://batch@db/uid2?schema=a' } });
    expect(stateSetting({}, {}, deps)).toEqual({
      value: '/home/ana/.config/uid2-batch/nightly.db',
      from: "state of profile 'default'",
    });
    expect(stateSetting({ profile: 'pg' }, {}, deps)).toEqual({
      value: 'postgresql://batch@db/uid2?schema=a',
      from: "state of profile 'pg'",
    });
  });
});
