import { ManifestReader } from '../../connectors/object-storage/manifest-reader.js';

/** The objects an export's manifest lists as committed, in name order, read as `orderly audit` reads them. */
export function committedObjects(manifestPath: string): string[] {
  const reader = new ManifestReader(manifestPath);
  try {
    return reader.committed().map((ref) => ref.object);
  } finally {
    reader.close();
  }
}
