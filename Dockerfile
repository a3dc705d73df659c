# syntax=docker/dockerfile:1
# Build: compile TypeScript and native modules, then keep production dependencies only.
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY schemas ./schemas
COPY db ./db
COPY console ./console
COPY scripts ./scripts
RUN npm run build && npm prune --omit=dev

# Run: the compiled service, as an unprivileged user.
FROM node:20-bookworm-slim
# MALLOC_ARENA_MAX: two glibc malloc arenas for Node's own threads, which keeps the resident set down under load.
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN mkdir -p /app/data && chown node:node /app/data
USER node
# The API, and the Prometheus metrics (METRICS_PORT), which only the scraper should reach.
EXPOSE 3000 9464
HEALTHCHECK --interval=30s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/live').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# As `npm start` runs it: a heap ceiling sized for a service, so V8 collects before the heap grows fourfold.
CMD ["node", "--max-old-space-size=1024", "dist/src/server.js"]
