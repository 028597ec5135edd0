# cfgu configuration proxy. The steps are the README's: `npm ci` (which also builds dist/ through the postinstall
# script) and `npm start` (the proxy on port 8080 with examples/.configu). For your own stores, mount a .configu and
# override the command, e.g. `docker run -v $PWD/.configu:/config/.configu -p 8080:8080 IMAGE \
#   node bin/cfgu.js serve --config /config/.configu`.
FROM node:20-bookworm

WORKDIR /app
RUN chown node:node /app
USER node

# The whole source is needed before `npm ci`: its postinstall step bundles src/ into dist/.
# (NODE_ENV is left unset here: the build needs the dev dependencies, esbuild among them.)
COPY --chown=node:node . .
RUN npm ci

# Listens on 0.0.0.0:8080 by default (CONFIGU_HTTP_HOST / CONFIGU_HTTP_PORT or interface.proxy.http change it).
EXPOSE 8080

# Liveness needs no key; readiness (/ready) is for the orchestrator's traffic decisions.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s CMD curl -fsS "http://127.0.0.1:${CONFIGU_HTTP_PORT:-8080}/live" >/dev/null || exit 1

# SIGTERM (docker stop) starts a graceful shutdown: /ready turns 503, in-flight requests finish, exit 0 within
# CONFIGU_SHUTDOWN_GRACE_SECONDS (default 10; keep docker's --time / terminationGracePeriodSeconds above it).
# npm forwards SIGTERM and SIGINT to the server.
STOPSIGNAL SIGTERM
CMD ["npm", "start"]
