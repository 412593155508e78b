-- The console's data pages (docs/console.md).

-- A click on a public review link of the thank-you page, once per review request and site (the
-- provider of the link): the funnel's last stage, "left a public review".
CREATE TABLE public_link_clicks (
  review_request_id  uuid NOT NULL REFERENCES review_requests (id) ON DELETE CASCADE,
  organization_id    uuid NOT NULL,
  provider           text NOT NULL,
  url                text NOT NULL,
  clicked_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (review_request_id, provider)
);

-- "Handled" marks of the ratings inbox: when, and by which member.
ALTER TABLE ratings ADD COLUMN handled_at timestamptz;
ALTER TABLE ratings ADD COLUMN handled_by text;

-- The inbox reads an organization's ratings newest first; the cascade list searches by externalId.
CREATE INDEX ratings_org_created ON ratings (organization_id, created_at DESC);
CREATE INDEX cascades_org_external_id ON cascades (organization_id, external_id) WHERE external_id IS NOT NULL;
