# cfgu configuration proxy: a multi-stage image (docs/deploy.md).
#
#   docker build -t cfgu .                      (official node images as bases)
#   node scripts/image-local.mjs                (buildah + local Debian minbase bases, no Docker needed)
#   docker run -v $PWD/.configu:/config/.configu:ro -p 8080:8080 cfgu serve
#   docker run -v $PWD:/config:ro cfgu eval --schema /config/app.cfgu.json
#
# The base images are build arguments: BUILDER_IMAGE needs Node 24 with npm, its headers and a C++ compiler (for
# the native modules); BASE_IMAGE needs Node 24 only. Every other build step works offline from the npm registry.
ARG BUILDER_IMAGE=node:24-bookworm
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BUILDER_IMAGE} AS builder
WORKDIR /build
# Dependencies first, so the layer is reused while the lockfile stays the same. The project's own postinstall (the
# bundle build) needs the sources, which come later: it is taken out here and run as its own step below.
COPY package.json package-lock.json ./
RUN npm pkg delete scripts.postinstall && npm ci --no-audit --no-fund && npm cache clean --force
COPY scripts ./scripts
COPY src ./src
COPY bin ./bin
COPY tsconfig.json LICENSE ./
# Then what the image never loads goes (scripts/prune-image.mjs), and the rest is proved to work before it is shipped:
# every production dependency loads, SQLite runs a query, an isolate runs a script (scripts/check-image.mjs).
# Permissions are set here, not in the runtime stage: a RUN chmod there would copy every file it touches into a new
# layer (the whole of node_modules twice in the image). COPY keeps these modes.
RUN node scripts/build.mjs && npm prune --omit=dev --no-audit --no-fund && node scripts/prune-image.mjs /build \
 && node scripts/check-image.mjs /build && chmod -R a+rX,go-w package.json LICENSE bin dist node_modules

FROM ${BASE_IMAGE}
ARG VERSION=1.0.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="cfgu" \
      org.opencontainers.image.description="Configuration proxy: evaluates Cfgu v1 configuration pipelines over real stores" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/configu/cfgu"
# Owned by root, readable by everyone, writable by no one but root: the process runs as an unprivileged user.
WORKDIR /app
COPY --from=builder --chown=0:0 /build/package.json /build/LICENSE ./
COPY --from=builder --chown=0:0 /build/bin ./bin
COPY --from=builder --chown=0:0 /build/dist ./dist
COPY --from=builder --chown=0:0 /build/node_modules ./node_modules
RUN chmod 755 /app && ln -s /app/bin/cfgu.js /usr/local/bin/cfgu && mkdir -p /config && chmod 755 /config
# One server process per container by default (scale with replicas); see docs/deploy.md for the sizing figures.
# HOME: the user has no home folder; /tmp is writable (the default backup database goes under $HOME/.cache).
ENV NODE_ENV=production \
    HOME=/tmp \
    CONFIGU_CONFIGURATION=/config/.configu \
    CONFIGU_WORKERS=1 \
    CONFIGU_EXPRESSION_WORKERS=1 \
    CONFIGU_EXPRESSION_SPARES=0 \
    CONFIGU_HTTP_PORT=8080
USER 65532:65532
EXPOSE 8080
# No curl in the image: `cfgu health` asks the server on its configured port, over HTTPS when TLS is on.
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 CMD ["cfgu", "health"]
# cfgu is PID 1 and handles SIGTERM/SIGINT itself: /ready turns 503, in-flight requests finish, exit 0 within
# CONFIGU_SHUTDOWN_GRACE_SECONDS (default 10; keep the stop timeout above it). It waits for its own children.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/app/bin/cfgu.js"]
CMD ["serve"]
