# Multi-stage image: the locked packages (requirements/run.txt) and the wheel built from the
# tree go into a virtualenv with a compiler at hand; the runtime stage copies that
# virtualenv and runs as a non-root user.
FROM python:3.11-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libgomp1 \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir uv==0.13.9
WORKDIR /src
COPY requirements/run.txt ./requirements/run.txt
RUN uv venv /opt/ebbtide \
    && uv pip install --no-cache --python /opt/ebbtide/bin/python -r requirements/run.txt
COPY pyproject.toml README.md ./
COPY app ./app
COPY ebbtide ./ebbtide
RUN uv build --wheel --out-dir /wheels . \
    && uv pip install --no-cache --python /opt/ebbtide/bin/python --no-deps /wheels/*

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends libgomp1 curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 ebbtide
COPY --from=build /opt/ebbtide /opt/ebbtide
ENV PATH=/opt/ebbtide/bin:$PATH
# The wheel carries the code and its migrations: nothing of the source tree is copied here,
# which is the path tests/integration/test_installed_wheel.py takes in a fresh virtualenv.
WORKDIR /home/ebbtide
USER ebbtide
ENV HOST=0.0.0.0 PORT=8000 EBBTIDE_DATA_DIR=/home/ebbtide/data EBBTIDE_LOG__FORMAT=json
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${PORT}/healthz" || exit 1
CMD ["ebbtide", "serve"]
