// Browser check of the exporter's pages: starts the exporter in demo mode
// with faults (a detail id that does not exist, a /probe target where
// nothing listens, a module whose key is refused, and a small service of
// this script's own whose list names itself as its next page, that
// redirects to a login page, that answers slowly, or whose first detail
// view answers 429), then loads the landing page and the target pages,
// with failures, in headless Chromium at 1280 and 390 px wide. It
// asserts that nothing overflows the viewport, that the failing rows come
// first, that a poll with failures or slowness is never shown in green (a
// failed pagination step included), that the pages say they show the
// sample service, what they tell of a refused key, a login redirect,
// requests not sent and a hold-off, and that opening a target's page sends
// nothing to it; and saves a full-page screenshot of each.
//
//   EXPORTER_BIN  exporter binary (default: built with go build into a temp dir)
//   CHROMIUM      browser (default /usr/bin/chromium, Debian's package)
//   ARTIFACT_DIR  where screenshots go (default: a new temp dir)
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const work = mkdtempSync(path.join(os.tmpdir(), 'dse-browser-'));
const artifacts = process.env.ARTIFACT_DIR || path.join(work, 'screenshots');
mkdirSync(artifacts, { recursive: true });

const widths = [1280, 390];
const green = 'rgb(26, 127, 55)';
let passed = 0;
let failed = 0;

function check(ok, what) {
  if (ok) {
    passed++;
    console.log(`ok - ${what}`);
  } else {
    failed++;
    console.log(`not ok - ${what}`);
  }
}

// freePort asks the kernel for a loopback port nobody uses right now.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// startExporter runs the exporter and resolves with the demo service's URL
// and the exporter's own address once it listens (on a port the kernel
// chose: a port found free beforehand may meanwhile go to the demo service).
function startExporter(bin, args) {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // However the check ends, the exporter it started ends with it.
  process.on('exit', () => child.kill('SIGTERM'));
  let log = '';
  const ready = new Promise((resolve, reject) => {
    const onData = (chunk) => {
      log += chunk;
      const demo = log.match(/Demo mode: watching the embedded sample service" url=(\S+)/);
      const listening = log.match(/msg="Listening on" address=(\S+)/);
      if (demo && listening) resolve({ demo: demo[1], address: listening[1] });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`exporter exited with ${code}:\n${log}`)));
  });
  return { child, ready, log: () => log };
}

async function get(url) {
  const res = await fetch(url);
  await res.arrayBuffer();
  return res.status;
}

// layoutProblems runs in the page: every element must lie inside the
// viewport (which also catches a table scrolling inside its own box), and
// the page must not scroll sideways.
function layoutProblems() {
  const problems = [];
  const vw = window.innerWidth;
  const doc = document.documentElement;
  if (doc.scrollWidth > vw) problems.push(`documentElement.scrollWidth ${doc.scrollWidth} > ${vw}`);
  if (document.body.scrollWidth > vw) problems.push(`body.scrollWidth ${document.body.scrollWidth} > ${vw}`);
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + String(el.className).replace(/ /g, '.') : '');
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + 1 || r.left < -1) {
      problems.push(`${name(el)} spans ${Math.round(r.left)}..${Math.round(r.right)} px, outside 0..${vw}: ${el.textContent.slice(0, 60)}`);
    }
  }
  return problems.slice(0, 10);
}

// orderProblems runs in the page: failing rows come before healthy ones,
// in the targets table and in each kept poll's requests.
function orderProblems() {
  const problems = [];
  const rank = (el) => ['failed', 'partial', 'slow', 'notsent', 'ok'].findIndex((c) => el.classList.contains(c));
  const groups = [[...document.querySelectorAll('#targets tbody tr')], ...[...document.querySelectorAll('section')].map((s) => [...s.querySelectorAll('pre')])];
  for (const rows of groups) {
    for (let i = 1; i < rows.length; i++) {
      if (rank(rows[i]) < rank(rows[i - 1])) problems.push(`"${rows[i].textContent.slice(0, 60)}" comes after "${rows[i - 1].textContent.slice(0, 60)}"`);
    }
  }
  return problems;
}

// colourProblems runs in the page: a result that names failures must carry
// the class of its state, and must not be drawn in the colour of success.
function colourProblems(green) {
  const problems = [];
  for (const row of document.querySelectorAll('section pre')) {
    const text = row.textContent;
    if (/walk stopped|walk not started/.test(text) && !row.classList.contains('failed')) {
      problems.push(`a failed pagination step is not marked failed: ${text.trim().slice(0, 80)}`);
    }
  }
  for (const el of document.querySelectorAll('td.failed, td.partial, td.slow, td.ok, span.result, pre.slow')) {
    const text = el.textContent.trim();
    const state = ['failed', 'partial', 'slow', 'ok', 'up', 'down'].find((s) => text.startsWith(s));
    if (!state && !el.matches('pre.slow')) continue;
    const bad = !/^(ok|up)$/.test(text);
    const colour = getComputedStyle(el).color;
    if (bad && (el.classList.contains('ok') || colour === green)) {
      problems.push(`"${text.slice(0, 60)}" is shown as success (class ${el.className}, colour ${colour})`);
    }
  }
  return problems;
}

async function main() {
  let bin = process.env.EXPORTER_BIN;
  if (!bin) {
    bin = path.join(work, 'deployment_service_exporter');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
  const closed = await freePort(); // nothing listens here: a network failure
  // A service of its own: under /loop its location list names itself as
  // the next page ("next": ""), under /sso everything redirects to a login
  // page on another origin, under /slow root answers after 2.2 s, under
  // /throttle detail view 1 answers 429 with Retry-After.
  let oddRequests = 0;
  const odd = http.createServer(async (req, res) => {
    oddRequests++;
    if (req.url === '/slow/api/') await new Promise((resolve) => setTimeout(resolve, 2200));
    if (req.url === '/throttle/api/projects/locations/1/') {
      res.writeHead(429, { 'Retry-After': '600', 'Content-Type': 'application/json' });
      res.end('{"detail": "Request was throttled."}');
      return;
    }
    if (req.url.startsWith('/sso/')) {
      res.writeHead(302, { Location: 'https://sso.example.test/accounts/login/?next=/api/' });
      res.end();
      return;
    }
    res.setHeader('Content-Type', 'application/json');
    if (req.url.startsWith('/loop/api/projects/locations/')) {
      res.end('{"next": "", "previous": null, "results": [{"id": 1}, {"id": 2}]}');
    } else if (req.url.startsWith('/loop/api/projects/projects/')) {
      res.end('[]');
    } else if (/^\/(slow|throttle)\/api\/projects\/(projects|locations)\/$/.test(req.url)) {
      res.end('[{"id": 1}, {"id": 2}, {"id": 3}]');
    } else {
      res.end('{}');
    }
  });
  await new Promise((resolve) => odd.listen(0, '127.0.0.1', resolve));
  const oddBase = `http://127.0.0.1:${odd.address().port}`;
  const config = path.join(work, 'modules.yml');
  writeFileSync(config, `modules:
  default:
    targets:
      - "http://127.0.0.1:*"
      - "http://127.0.0.1:*/a/rather/long/path/prefix/that/must/wrap/on/a/phone"
      - "http://127.0.0.1:*/loop"
      - "http://127.0.0.1:*/sso"
      - "http://127.0.0.1:*/slow"
    http_client_config:
      authorization: {type: Token, credentials: key-the-demo-service-refuses}
    timeout: 5s
  throttled:
    targets: ["http://127.0.0.1:*/throttle"]
    concurrency: 1
    locations: {detail_ids: [1, 2, 3]}
    timeout: 5s
`);
  const exporter = startExporter(bin, [
    '--demo', '--locations.detail-id=1', '--locations.detail-id=2', '--locations.detail-id=999999',
    `--config.file=${config}`, `--web.listen-address=127.0.0.1:0`,
  ]);
  let browser;
  try {
    const { demo, address } = await exporter.ready;
    const base = `http://${address}`;
    // A poll with one detail view at 404 (partial), one with nothing
    // listening (failed, network) and one with a refused key (failed, 401).
    check((await get(`${base}/metrics`)) === 200, '/metrics answers');
    check((await get(`${base}/probe?target=${encodeURIComponent(`http://127.0.0.1:${closed}/a/rather/long/path/prefix/that/must/wrap/on/a/phone`)}`)) === 200, '/probe of a closed port answers');
    check((await get(`${base}/probe?target=${encodeURIComponent(demo)}`)) === 200, '/probe with a refused key answers');
    check((await get(`${base}/probe?target=${encodeURIComponent(`${oddBase}/loop`)}`)) === 200, '/probe of a list that names itself as next answers');
    check((await get(`${base}/probe?target=${encodeURIComponent(`${oddBase}/sso`)}`)) === 200, '/probe of a service redirecting to a login page answers');
    check((await get(`${base}/probe?target=${encodeURIComponent(`${oddBase}/slow`)}`)) === 200, '/probe of a slow service answers');
    const throttled = `${base}/probe?module=throttled&target=${encodeURIComponent(`${oddBase}/throttle`)}`;
    check((await get(throttled)) === 200 && (await get(throttled)) === 200, 'two /probes of a service that asks to hold off answer');

    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      chromiumSandbox: false,
      args: ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const cspViolations = [];
    page.on('console', (msg) => {
      if (/Content Security Policy/i.test(msg.text())) cspViolations.push(msg.text());
    });
    const csp = (await page.goto(`${base}/`)).headers();
    const policy = csp['content-security-policy'] || '';
    check(/default-src 'none'/.test(policy) && /frame-ancestors 'none'/.test(policy) && !/script-src/.test(policy) &&
      csp['x-content-type-options'] === 'nosniff', `the landing page allows no script and no framing (${policy})`);
    check(await page.evaluate(() => getComputedStyle(document.body).maxWidth) === '1280px',
      'the inline style applies under the Content-Security-Policy');
    const links = await page.$$eval('#targets tbody tr', (rows) => rows.map((tr) => ({
      state: tr.className,
      href: tr.querySelector('td[data-label="Last poll"] a').getAttribute('href'),
    })));
    const failedPoll = links.find((l) => l.state === 'failed');
    const partialPoll = links.find((l) => l.state === 'partial');
    check(failedPoll && partialPoll, `the landing page lists a failed and a partial target (${JSON.stringify(links)})`);
    const targets = await page.$$eval('#targets tbody tr', (rows) => rows.length);
    check(targets === 7, `the targets table has the /metrics service and the six /probe targets (${targets} rows)`);
    // Each target's page and state, by "target|module".
    const targetRows = await page.$$eval('#targets tbody tr', (rows) => Object.fromEntries(rows.map((tr) => {
      const cell = (label) => tr.querySelector(`td[data-label="${label}"]`);
      return [`${cell('Target').textContent}|${cell('Module').textContent}`, {
        href: cell('Target').querySelector('a').getAttribute('href'), state: cell('State').textContent, colour: getComputedStyle(cell('State')).color,
      }];
    })));
    const targetPages = Object.fromEntries(Object.entries(targetRows).map(([k, v]) => [k, v.href]));
    const slowState = targetRows[`${oddBase}/slow|default`] || {};
    check(/^up, slow: root 2\.\d+s$/.test(slowState.state) && slowState.colour !== green, `a slow service is not a green "up" (${JSON.stringify(slowState)})`);

    check(await page.$('#demo') !== null, 'the landing page says it shows the embedded sample service');
    // The "Last poll" link of a target: its page, at the poll's section.
    const pollOf = async (target) => {
      await page.goto(`${base}/`);
      return page.$$eval('#targets tbody tr', (rows, t) => {
        const tr = rows.find((r) => r.querySelector('td[data-label="Target"]').textContent === t);
        return tr ? tr.querySelector('td[data-label="Last poll"] a').getAttribute('href') : null;
      }, target);
    };
    const loopPoll = await pollOf(`${oddBase}/loop`);
    const ssoPoll = await pollOf(`${oddBase}/sso`);
    const refusedPoll = await pollOf(demo);
    check(loopPoll && ssoPoll && refusedPoll, 'the landing page lists the polls of the looping, redirecting and refusing services');

    const throttledPage = targetPages[`${oddBase}/throttle|throttled`];
    if (throttledPage) {
      const sent = oddRequests;
      await page.goto(`${base}/${throttledPage}`);
      check(oddRequests === sent, `opening a target's page sends nothing to the service (${oddRequests - sent} requests)`);
      const titles = await page.$$eval('h2', (hs) => hs.map((h) => h.textContent));
      check(titles.length === 2 && /^Latest poll/.test(titles[0]) && /^First failing poll, the poll that started the hold-off/.test(titles[1]),
        `the held-off target's page shows its latest poll and the one that met the 429 (${JSON.stringify(titles)})`);
      const notSent = await page.$$eval('pre.notsent', (rows) => rows.map((pre) => pre.textContent));
      check(notSent.length === 2 && notSent.every((t) => /-> not sent: held off until \d{4}-.* after a 429 with Retry-After "600"$/.test(t)),
        `detail views not sent read "not sent", with the hold-off and the Retry-After it obeys (${JSON.stringify(notSent)})`);
      const state = await page.textContent('#failing');
      check(/location_detail 1 http_status 429; not sent: location_detail; held off until .* with Retry-After "600"/.test(state) && !/location_detail \(no response\)/.test(state),
        `the held-off target's summary names the location and the Retry-After (${state})`);
    }

    const section = (href) => `section#${href.split('#')[1]}`;
    if (ssoPoll) {
      await page.goto(`${base}/${ssoPoll}`);
      const text = await page.textContent(section(ssoPoll));
      check(/another origin than/.test(text) && /the key is never sent there/.test(text),
        `a redirect to another origin says it was not followed and the key not sent: ${text.replace(/\s+/g, ' ').slice(0, 200)}`);
      check(text.includes('https://sso.example.test/accounts/login/?next=/api/'), 'the Location is shown as sent');
    }
    if (refusedPoll) {
      await page.goto(`${base}/${refusedPoll}`);
      const text = await page.textContent(section(refusedPoll));
      check(/WWW-Authenticate: Token/.test(text), 'a refused key shows the WWW-Authenticate header');
      check(/refused the exporter's key/.test(text), 'a refused key says so in plain words');
    }

    await page.goto(`${base}/`);
    await page.fill('input[name="target"]', demo);
    const submitted = await Promise.all([
      page.waitForURL(/\/probe\?/, { timeout: 10_000 }), page.click('input[type="submit"]'),
    ]).then(() => true, () => false);
    check(submitted && /deployment_service_up 0/.test(await page.textContent('body')),
      'the probe form submits under the Content-Security-Policy');

    const pages = [['landing', '/']];
    if (failedPoll) pages.push(['target-failed', '/' + failedPoll.href]);
    if (partialPoll) pages.push(['target-partial', '/' + partialPoll.href]);
    if (loopPoll) pages.push(['target-pagination', '/' + loopPoll]);
    if (throttledPage) pages.push(['target-held-off', '/' + throttledPage]);
    const metricsPage = targetPages[`${demo}|— (/metrics)`];
    if (metricsPage) {
      pages.push(['target-metrics', '/' + metricsPage]);
      await page.goto(`${base}/${metricsPage}`);
      const h1 = await page.textContent('h1');
      check(h1 === `Target ${demo}`, `the /metrics target is called by its URL (${h1})`);
      check(await page.$('#demo') !== null, 'the page of the --demo service says it shows the sample service');
    }
    if (targetPages[`${oddBase}/slow|default`]) pages.push(['target-slow', '/' + targetPages[`${oddBase}/slow|default`]]);
    for (const width of widths) {
      await page.setViewportSize({ width, height: 900 });
      for (const [name, url] of pages) {
        await page.goto(base + url);
        const layout = await page.evaluate(layoutProblems);
        check(layout.length === 0, `${name} at ${width} px fits the width${layout.length ? ':\n    ' + layout.join('\n    ') : ''}`);
        const order = await page.evaluate(orderProblems);
        check(order.length === 0, `${name} at ${width} px shows the failing rows first${order.length ? ':\n    ' + order.join('\n    ') : ''}`);
        const colours = await page.evaluate(colourProblems, green);
        check(colours.length === 0, `${name} at ${width} px shows no failure in green${colours.length ? ':\n    ' + colours.join('\n    ') : ''}`);
        const shot = path.join(artifacts, `${name}-${width}.png`);
        // Screenshots are for people, not checks: Chromium on a loaded machine
        // sometimes cannot capture one, so it is tried twice and then skipped.
        try {
          await page.screenshot({ path: shot, fullPage: true }).catch(() => page.screenshot({ path: shot, fullPage: true }));
          console.log(`    screenshot ${shot}`);
        } catch (err) {
          console.log(`    screenshot not taken: ${err.message.split('\n')[0]}`);
        }
      }
    }
    check(cspViolations.length === 0, `no page breaks its Content-Security-Policy${cspViolations.length ? ':\n    ' + cspViolations.join('\n    ') : ''}`);
  } finally {
    if (browser) await browser.close();
    exporter.child.kill('SIGTERM');
    odd.close();
  }
}

const deadline = setTimeout(() => {
  console.log('not ok - the browser check did not finish within 120 s');
  process.exit(1);
}, 120_000);
deadline.unref();

main().then(() => {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}, (err) => {
  console.log(`not ok - ${err.stack || err}`);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});
