# syntax=docker/dockerfile:1
# One image for every role: `start --roles watcher|worker|reader` picks what a container runs
# (see docker-compose.yml and docs/production.md).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bin ./bin
COPY schemas ./schemas
# The consumers' client, a workspace the `mirror` command loads.
COPY packages/client/package.json packages/client/tsconfig.json ./packages/client/
COPY packages/client/src ./packages/client/src
COPY packages/client/bin ./packages/client/bin
# npm ci runs `prepare` (the TypeScript build into dist/), then the dev dependencies go.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
# Memory (bench/memory.ts and bench/stall.ts measure these):
# - MALLOC_ARENA_MAX=2: glibc gives threads that allocate (libuv's pool: zlib, file calls) arenas
#   of their own, and an arena's memory stays at its high-water mark; two keep RSS lower.
# - MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_=131072: blocks of 128 KB and more (file bytes,
#   a build thread's heap) are mapped and unmapped on their own and freed memory goes back at
#   once; by default glibc raises that threshold after the first big free, and memory a burst
#   used stays with the process (bench:stall: ~30 MB less RSS after a burst of delta builds).
# - --max-semi-space-size=4 (MB): caps V8's young generation, which otherwise grows to 2 × 16 MB
#   in a busy process and stays there, for next to no CPU per request.
# Setting NODE_OPTIONS yourself replaces the flag: keep it in yours.
ENV NODE_ENV=production \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    MALLOC_TRIM_THRESHOLD_=131072 \
    NODE_OPTIONS=--max-semi-space-size=4
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/schemas ./schemas
COPY --from=build /app/packages/client/package.json ./packages/client/
COPY --from=build /app/packages/client/dist ./packages/client/dist
# The folders the inbox and rejected volumes are mounted on, owned by the user the service runs
# as: an empty named volume takes the owner of the folder it is mounted on, so the watcher and
# workers (user node, uid 1000) can create INBOX_DIR/.processing and write REJECTED_DIR.
RUN mkdir -p /data/inbox /data/rejected && chown -R node:node /data
USER node
# A reader on every core the container is given: `start --roles reader --processes auto` (reader
# processes on one port, SO_REUSEPORT; docs/production.md, Scaling).
ENTRYPOINT ["node", "dist/bin/oddsfiles.js"]
CMD ["start"]
