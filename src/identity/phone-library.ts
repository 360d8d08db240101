// libphonenumber-js, loaded the first time a phone needs it rather than when the identity code is imported.
//
// Its full metadata costs every process and row thread that loads it a noticeable share of a small run's start, and
// most runs never read a national number: E.164 cells and emails never call it. The calls that need it are
// synchronous, so it is loaded with require (the package ships a CommonJS build of the same code).
import { createRequire } from 'node:module';

type PhoneLibrary = typeof import('libphonenumber-js/max');

const require = createRequire(import.meta.url);
let library: PhoneLibrary | undefined;

/** The library, loaded on the first call. */
export function phoneLibrary(): PhoneLibrary {
  library ??= require('libphonenumber-js/max') as PhoneLibrary;
  return library;
}
