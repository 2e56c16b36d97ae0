# The llm-sizing code location: a gRPC server (`dagster api grpc`) that the webserver and
# daemon load definitions from and that the K8sRunLauncher starts runs (and the k8s job
# executor steps) from. The deploy extra brings dagster-k8s and dagster-postgres.
# Build: docker build -t llm-sizing:<tag> .   Values for Dagster's chart: deploy/helm/.
FROM python:3.11-slim

RUN pip install --no-cache-dir uv==0.13.9
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    PATH=/app/.venv/bin:$PATH PYTHONUNBUFFERED=1

WORKDIR /app
# Dependencies first (a layer that changes only with the lock), then the code and data.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --extra deploy --no-install-project
COPY sizing sizing
COPY assets assets
COPY warehouse warehouse
COPY pipeline pipeline
COPY data data
RUN uv sync --frozen --no-dev --extra deploy

# The code stays root-owned and read-only to the server. Postgres holds the instance;
# DAGSTER_HOME is where the chart mounts its dagster.yaml. The user's home takes the
# caches, and the site (rendered from files, so kept locally when the tables are on S3).
RUN useradd --system --uid 10001 --create-home --home-dir /home/llm-sizing llm-sizing \
    && mkdir -p /opt/dagster/dagster_home && chown llm-sizing /opt/dagster/dagster_home
ENV DAGSTER_HOME=/opt/dagster/dagster_home LLM_SIZING_SITE_DIR=/home/llm-sizing/site
USER 10001

EXPOSE 3030
CMD ["dagster", "api", "grpc", "-m", "pipeline.definitions", "-h", "0.0.0.0", "-p", "3030"]
