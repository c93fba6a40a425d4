// Debian's Chromium for the browser suites (tests/ui), driven by playwright-core: launched the
// same way by each, and the web UI unlocked with the admin key as a user does.

const { chromium } = await import(process.env.PLAYWRIGHT_CORE || "playwright-core");

/** A headless Chromium (the system's, never a downloaded one), quiet: no first-run, sync or
 * background traffic. `extra` adds switches. */
export function launch(extra = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", ...extra, "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/** Opens the UI of the Baton at `url` in `page` and unlocks it with `adminKey`, then waits for
 * the provider list. */
export async function signIn(page, url, adminKey) {
  await page.goto(`${url}/ui/`);
  await page.fill("#admin-key", adminKey);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#provider-list > li");
}
