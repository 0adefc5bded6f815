-- Destination tables of the built-in democrm provider. Each row carries its workspace and
-- source id; foreign keys are resolved through the ledger (source id -> row id).

CREATE TABLE crm_organizations (
    id         bigserial    PRIMARY KEY,
    workspace  text         NOT NULL,
    source_id  bigint       NOT NULL,
    name       varchar(255) NOT NULL,
    domain     varchar(255),
    created_at timestamptz
);

CREATE TABLE crm_people (
    id              bigserial    PRIMARY KEY,
    workspace       text         NOT NULL,
    source_id       bigint       NOT NULL,
    organization_id bigint       REFERENCES crm_organizations (id),
    name            varchar(255) NOT NULL,
    email           varchar(255),
    phone           varchar(64)
);

CREATE TABLE crm_deals (
    id              bigserial     PRIMARY KEY,
    workspace       text          NOT NULL,
    source_id       bigint        NOT NULL,
    organization_id bigint        REFERENCES crm_organizations (id),
    title           varchar(255)  NOT NULL,
    value           numeric(14, 2),
    currency        varchar(3),
    stage           varchar(64),
    status          varchar(32)
);

CREATE TABLE crm_deal_people (
    deal_id   bigint NOT NULL REFERENCES crm_deals (id),
    person_id bigint NOT NULL REFERENCES crm_people (id),
    PRIMARY KEY (deal_id, person_id)
);

CREATE TABLE crm_messages (
    id        bigserial    PRIMARY KEY,
    workspace text         NOT NULL,
    source_id bigint       NOT NULL,
    deal_id   bigint       REFERENCES crm_deals (id),
    subject   varchar(255) NOT NULL,
    sender    varchar(255),
    sent_at   timestamptz,
    body      text
);
