// The peer: sitemap.js (npm `sitemap` 9.x) on the inventory's rows, run by bench/run.py.
// Reads NDJSON rows {url, lastmod, changefreq, priority} (exported from the Parquet before the
// timing starts), streams them through SitemapAndIndexStream (45,000 URLs a file, its default)
// into gzipped files (zlib createGzip), one Node thread. Its fastest settings: ErrorLevel.SILENT
// (no validation of the items), and each file's XML coalesced into 64 KiB writes before the
// gzip: SitemapStream pushes every tag as its own small chunk, and Node's zlib stream takes a
// thread-pool round trip per chunk (20,000 rows: 6.1 s without, most of it that). Rows
// without a URL are skipped (sitemap.js cannot take them).
// Prints a JSON summary on stdout.
//   node sitemapjs_peer.js <module dir> <rows.ndjson> <out dir> <site url> <gzip level>
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const readline = require('node:readline');
const { createGzip } = require('node:zlib');
const { Transform } = require('node:stream');
const { pipeline } = require('node:stream/promises');

// Joins small chunks into writes of at least `size` bytes (the last one smaller).
function coalesce(size = 65536) {
  let parts = [];
  let bytes = 0;
  return new Transform({
    transform(chunk, _enc, cb) {
      parts.push(chunk);
      bytes += chunk.length;
      if (bytes >= size) {
        const out = Buffer.concat(parts);
        parts = [];
        bytes = 0;
        cb(null, out);
      } else {
        cb();
      }
    },
    flush(cb) { cb(null, bytes ? Buffer.concat(parts) : undefined); },
  });
}

const [moduleDir, input, out, site, level] = process.argv.slice(2);
const { SitemapAndIndexStream, SitemapStream, ErrorLevel } =
  require(path.join(moduleDir, 'node_modules', 'sitemap'));

async function main() {
  const started = process.hrtime.bigint();
  fs.mkdirSync(out, { recursive: true });
  let rows = 0;
  let urls = 0;
  const gzipLevel = Number(level);
  const sms = new SitemapAndIndexStream({
    level: ErrorLevel.SILENT,
    getSitemapStream: (i) => {
      const sitemap = new SitemapStream({ level: ErrorLevel.SILENT });
      const name = `sitemap-${i}.xml.gz`;
      const ws = fs.createWriteStream(path.join(out, name));
      sitemap.pipe(coalesce()).pipe(createGzip({ level: gzipLevel })).pipe(ws);
      return [new URL(name, site).toString(), sitemap, ws];
    },
  });
  async function* items() {
    const lines = readline.createInterface({ input: fs.createReadStream(input), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line) continue;
      rows++;
      const r = JSON.parse(line);
      if (!r.url || !r.url.trim()) continue;
      const item = { url: r.url };
      if (r.lastmod != null) item.lastmod = r.lastmod;
      if (r.changefreq != null) item.changefreq = r.changefreq;
      if (r.priority != null) item.priority = r.priority;
      urls++;
      yield item;
    }
  }
  await pipeline(items, sms, coalesce(), createGzip({ level: gzipLevel }),
                 fs.createWriteStream(path.join(out, 'sitemap-index.xml.gz')));
  const files = fs.readdirSync(out).filter((f) => f.endsWith('.xml.gz'));
  const gzipBytes = files.reduce((n, f) => n + fs.statSync(path.join(out, f)).size, 0);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  process.stdout.write(JSON.stringify({ input_rows: rows, urls, files: files.length,
    gzip_bytes: gzipBytes, gzip_level: gzipLevel, seconds: Math.round(seconds * 1000) / 1000,
    node: process.version,
    sitemap: require(path.join(moduleDir, 'node_modules', 'sitemap', 'package.json')).version }) + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
