// Pictures of the key dashboard panels, from Prometheus's own graph page (the classic
// UI Debian's prometheus serves) in Debian's chromium: run by tests/server/metrics.rs
// when JOBWHEEL_PANELS names a folder, against the Prometheus it started, which has
// scraped a served instance running jobs for a while.
//
// Env: JW_PROM (http://127.0.0.1:port), JW_OUT (the folder), JW_PANELS (JSON: a list
// of {name, expr, range}).
import { chromium } from 'playwright-core';

const prom = process.env.JW_PROM;
const out = process.env.JW_OUT;
const panels = JSON.parse(process.env.JW_PANELS);

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const page = await (await browser.newContext({ viewport: { width: 1100, height: 760 } })).newPage();
for (const p of panels) {
  const q = `g0.expr=${encodeURIComponent(p.expr)}&g0.tab=0&g0.range_input=${p.range}`;
  await page.goto(`${prom}/classic/graph?${q}`);
  // The graph is drawn once the query answered: a line per series.
  await page.waitForFunction(() => document.querySelectorAll('.rickshaw_graph svg path.path').length > 0, null, { timeout: 20000 });
  await page.waitForTimeout(500);
  await page.screenshot({ path: `${out}/${p.name}.png`, fullPage: true });
  console.log(`${p.name}: ${await page.locator('.rickshaw_graph svg path.path').count()} lines`);
}
await browser.close();
