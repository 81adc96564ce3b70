/**
 * Bundles the dashboard and the HTML report's script before any test file runs: the coordinator
 * serves dist/dashboard/app.js and every HTML report inlines dist/dashboard/report-page.js, so
 * the tests must see the bundles of the sources they test, not whatever a last build left.
 */
import { bundleBrowserCode } from '../../scripts/bundle.js';

export default async function setup(): Promise<void> {
  await bundleBrowserCode();
}
