# What `make ee` builds the root execution-environment.yml FROM, in place of Automation Platform 2.5's minimal EE,
# which no registry here serves: the local Debian 12 image with what that EE base has (ansible-core 2.16,
# ansible-runner, Python with pip, microdnf), and community.docker, which only reaches the demo node, a container.
# The microdnf here hands its packages to apt-get; pip trusts the CA bundle pip trusts on this machine.
ARG BASE
FROM ${BASE}
ARG ANSIBLE_CORE
ARG ANSIBLE_RUNNER
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CERT=/usr/local/share/blackwell-ee/ca-certificates.crt
COPY ca-certificates.crt /usr/local/share/blackwell-ee/ca-certificates.crt
COPY microdnf /usr/bin/microdnf
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-pip \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m pip install --no-cache-dir "ansible-core==${ANSIBLE_CORE}" "ansible-runner==${ANSIBLE_RUNNER}"
COPY community-docker.tar /tmp/community-docker.tar
RUN mkdir -p /usr/share/ansible/collections/ansible_collections/community \
    && tar -xf /tmp/community-docker.tar -C /usr/share/ansible/collections/ansible_collections/community \
    && rm /tmp/community-docker.tar
