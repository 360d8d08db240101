/** The columns of a map run, chosen once from what was asked and the input's header: the engine's and the output's. */
import type { PhoneRegion } from '../../identity/index.js';
import { requireTextColumns } from '../io/parquet/parquet-columns.js';
import { chooseRegion, phoneRegionColumnIndex, withNullMarkers, withPhoneRegion } from '../map/column-options.js';
import {
  ColumnError,
  resolveIdentifierColumns,
  type ColumnFlags,
  type IdentifierColumn,
} from '../map/identifier-columns.js';
import type { ResultLayout } from '../map/result-columns.js';
import { resolveResultLayout, type LayoutRequest } from '../map/result-layout.js';
import { UserError } from '../run/exit-codes.js';
import type { Say } from '../run/run-deps.js';
import type { TableInput } from '../threads/table-input.js';
import { headerlessColumns } from './headerless-input.js';

/** What a map run asks of its columns: which hold identifiers, their phone region and null markers, the layout. */
export interface ColumnsRequest extends ColumnFlags {
  /** --phone-region; else the profile's `profilePhoneRegion`, as written, and where it came from. */
  phoneRegion?: PhoneRegion | undefined;
  profilePhoneRegion?: { value: string; from: string } | undefined;
  /** --phone-region-col: each row's phones are read in the country this column names. */
  phoneRegionColumn?: string | undefined;
  /** --null-value: identifier cells so written are missing (besides empty cells and \N). */
  nullValues?: string[] | undefined;
  /** --keep, --drop-input-columns, --result-prefix, --emit-hash, with the output's time and hash formats. */
  layout: LayoutRequest;
}

/** The engine's identifier columns and the output's layout. */
export interface MapColumns {
  columns: IdentifierColumn[];
  layout: ResultLayout;
}

/**
 * Chooses the columns for `source` (a headerless input has its own); a column asked for that the input lacks
 * is a usage error, and a note on columns picked by their names is said.
 */
export function chooseMapColumns(request: ColumnsRequest, source: TableInput, say: Say): MapColumns {
  try {
    let identifiers = headerlessColumns(source);
    if (identifiers === undefined) {
      const resolved = resolveIdentifierColumns(source.header, request, source.name);
      if (resolved.note !== undefined) say(resolved.note);
      identifiers = resolved.columns;
    }
    const regionIndex =
      request.phoneRegionColumn === undefined
        ? undefined
        : phoneRegionColumnIndex(source.header, request.phoneRegionColumn, identifiers, source.name);
    const region = chooseRegion(request.phoneRegion, { phoneRegion: request.profilePhoneRegion });
    const columns = withNullMarkers(withPhoneRegion(identifiers, region, regionIndex), request.nullValues);
    // a Parquet column of numbers or nested values holds no identifier as the service reads one
    requireTextColumns(
      source,
      columns.map((c) => c.name),
    );
    return { columns, layout: resolveResultLayout(source.header, columns, request.layout, source.name) };
  } catch (err) {
    if (err instanceof ColumnError) throw new UserError(err.message);
    throw err;
  }
}
