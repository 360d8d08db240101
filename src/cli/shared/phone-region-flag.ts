/** The --phone-region flag as help shows it: text only, so a command can list it without loading phone rules. */
import type { Command } from 'commander';

/** `profile`: the command reads a profile, whose phone_region is the default (hash reads none: it is offline). */
export function phoneRegionHelp(profile: boolean): string {
  return (
    'read phones written in national or formatted form as numbers of this country (ISO 3166 alpha-2: US, GB, ' +
    `FR...) and hash them in E.164; without it a phone must already be E.164${profile ? ' (default: phone_region of the profile)' : ''}`
  );
}

export const PHONE_REGION_COL_HELP =
  "read each row's phones in the country of this column (ISO 3166 alpha-2 in any case, or an English country name: " +
  'DE, br, Brazil, United Kingdom, USA...); --phone-region is the country of rows whose cell is empty; a name not ' +
  "known makes that row's phone invalid. A number with its own country code (+55..., 0055...) keeps it";

/** The flags with no parser: the command's work checks the code when it runs (a usage error before any file). */
export function addPhoneRegionText(cmd: Command, profile: boolean): Command {
  return cmd
    .option('--phone-region <CC>', phoneRegionHelp(profile))
    .option('--phone-region-col <COL>', PHONE_REGION_COL_HELP);
}
