# syntax=docker/dockerfile:1
# One image for every role: `start --roles watcher|worker|reader` picks what a container runs
# (see docker-compose.yml and docs/production.md).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
COPY schemas ./schemas
# npm ci runs `prepare` (the TypeScript build into dist/), then the dev dependencies go.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
# Memory (bench/memory.ts; docs/BENCHMARKS.md, memory), measured on a reader holding 38 × 200 KB:
# - MALLOC_ARENA_MAX: glibc's malloc gives threads that allocate (libuv's pool: zlib, file calls)
#   arenas of their own, up to eight per core, and an arena's memory tends to stay at its
#   high-water mark. Two arenas: settled RSS 114 → 100 MB, peak 139 → 124 MB.
# - --max-semi-space-size=4 (MB): V8's young generation grows to 2 × 16 MB in a busy process and
#   stays there while it is busy. 4 MB: a reader under load 130 → 113 MB, its peak 130 → 118 MB,
#   for 0–1 µs more CPU per request (of 33–36); a worker's CPU per drop did not grow.
# Setting NODE_OPTIONS yourself replaces the flag: keep it in yours.
ENV NODE_ENV=production \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2 \
    NODE_OPTIONS=--max-semi-space-size=4
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/schemas ./schemas
# The folders the inbox and rejected volumes are mounted on, owned by the user the service runs
# as: an empty named volume takes the owner of the folder it is mounted on, so the watcher and
# workers (user node, uid 1000) can create INBOX_DIR/.processing and write REJECTED_DIR.
RUN mkdir -p /data/inbox /data/rejected && chown -R node:node /data
USER node
ENTRYPOINT ["node", "dist/workers/oddsfiles.js"]
CMD ["start"]
