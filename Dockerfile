# The same build as `npm run build`, then only the binary in a slim glibc image.
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app --create-home usersvc
WORKDIR /app
COPY --from=build /src/dist/usersvc /usr/local/bin/usersvc
USER usersvc
VOLUME ["/app/data"]
ENV PORT=8080 HOST=0.0.0.0
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=5s CMD curl -fs http://127.0.0.1:8080/actuator/health >/dev/null || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["usersvc"]
CMD ["serve"]
