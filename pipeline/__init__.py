"""sitemap-pipeline: a URL inventory in Parquet becomes published sitemaps.

Every stage is a plain function in its own module (load, diff, plan, render,
publish); `pipeline.run` chains them and the Airflow DAGs call them one task
each. Nothing here imports Airflow.
"""

__version__ = "0.1.0"
