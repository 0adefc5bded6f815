// A rate limiter for json-server 0.17.4, loaded with `--middlewares` (json-server has none of its
// own): at most FERRYMAN_RATE_LIMIT_REQUESTS requests per fixed window of
// FERRYMAN_RATE_LIMIT_SECONDS seconds; the others are answered 429 with Retry-After (whole seconds
// until the window ends). GET /__ratelimit answers how many were limited and how many passed.
const requests = parseInt(process.env.FERRYMAN_RATE_LIMIT_REQUESTS || "0", 10);
const windowMs = 1000 * parseFloat(process.env.FERRYMAN_RATE_LIMIT_SECONDS || "1");
let windowStart = Date.now();
let used = 0;
let limited = 0;
let passed = 0;

module.exports = (req, res, next) => {
  if (req.path === "/__ratelimit") {
    res.json({ limited, passed });
    return;
  }
  const now = Date.now();
  if (now - windowStart >= windowMs) {
    windowStart = now;
    used = 0;
  }
  if (requests > 0 && used >= requests) {
    limited += 1;
    const wait = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
    res.set("Retry-After", String(wait));
    res.status(429).json({ error: "rate limited: retry later" });
    return;
  }
  used += 1;
  passed += 1;
  next();
};
