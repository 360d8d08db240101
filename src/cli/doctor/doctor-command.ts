/** Registers `uid2-batch doctor`: its options and help; the checks and the client are loaded only when it runs. */
import type { Command } from 'commander';
import { addConnectionOptions, connectionFlags } from '../shared/options.js';
import { parseRoles, ROLES, type Role } from './doctor-roles.js';

export function registerDoctorCommand(program: Command): void {
  const cmd = program
    .command('doctor')
    .description(
      "check configuration, credentials, reachability, clock skew and the API key's roles, with a fix for each failure",
    )
    .option('--json', 'print the checks as JSON')
    .option('--roles <list>', `roles to check, comma-separated: ${ROLES.join(', ')}`, parseRoles, [...ROLES])
    .addHelpText(
      'after',
      '\nExit codes: 0 every check passed (warnings allowed); 1 some check failed; 4 the service refused the API key (401).\n' +
        'Checks: configuration, credentials (where each comes from, never the value), reachability (GET /ops/healthcheck),\n' +
        'API key, client secret, clock skew (fails beyond 60 s, warns beyond 30 s), mapper role (v3 map),\n' +
        'generator role (token generate + validate), opt-out status, token refresh.',
    );
  addConnectionOptions(cmd);
  cmd.action(async (opts: Record<string, unknown>) => {
    const [{ formatReport, probeHealth, runDoctor }, { openConnection, resolveFor }] = await Promise.all([
      import('./doctor.js'),
      import('../token/token-connect.js'),
    ]);
    const flags = connectionFlags(opts);
    const report = await runDoctor(
      { roles: (opts.roles as Role[] | undefined) ?? ROLES },
      {
        resolve: () => resolveFor(flags, { apiKey: false, clientSecret: false }),
        open: (config) => openConnection(config),
        healthcheck: probeHealth,
      },
    );
    process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
    process.exitCode = report.exitCode;
  });
}
